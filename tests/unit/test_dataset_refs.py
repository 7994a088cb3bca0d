"""The spec's dataset reference grammar: names, aliases, IDs, URLs and the references over them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.odf.dataset_refs import (
    HOSTNAME_PATTERN,
    AccountName,
    DatasetAlias,
    DatasetAliasAmbiguous,
    DatasetAliasRemote,
    DatasetHandle,
    DatasetHandleRemote,
    DatasetIdRemote,
    DatasetName,
    DatasetRef,
    DatasetRefAny,
    DatasetRefRemote,
    DatasetUrl,
    RepoName,
)
from common.odf.errors import ValidationError
from common.odf.identity import DatasetID

SEEDED_KEY = DatasetID.new_seeded(b"key")
SEEDED_KEY_BASE58 = "did:odf:z6MkmgVreHBu2ABaD59Jq1J2JneXwzpsUWwEWXS4kLhjb4V4"  # kamu-cli tests

# -- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["cities", "local.id-only", "admin0.countries.10m", "ca.bc.gov", "NY-NewYork", "a", "0-9"],
)
def test_valid_names(text: str) -> None:
    for kind in (DatasetName, AccountName, RepoName):
        name = kind.parse(text)
        assert str(name) == text
        assert kind(text) == name


INVALID_NAMES: list[tuple[str, str]] = [
    ("My Dataset", "' ' at position 2 is not allowed"),
    ("", "it is empty"),
    (".invalid", "empty part"),
    ("invalid.", "empty part"),
    ("invalid..id", "empty part"),
    ("invalid-", "part 'invalid-' starts or ends with '-'"),
    ("-x.y", "part '-x' starts or ends with '-'"),
    ("invalid--id", "two '-' in a row"),
    ("in^valid", "'^' at position 2"),
    ("under_score", "'_' at position 5"),
    ("acc/name", "'/' at position 3"),
    ("naïve", "'ï' at position 2"),
    ("name\n", "'\\n' at position 4"),
]
"""Text that is not a valid ``DatasetName``, and why."""


def test_names_are_case_insensitive_but_keep_their_spelling() -> None:
    a, b = DatasetName("NY-NewYork"), DatasetName("ny-newyork")
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert str(a) == "NY-NewYork"
    assert repr(a) == "DatasetName('NY-NewYork')"
    assert DatasetName("a") != DatasetName("b")
    assert sorted([DatasetName("b"), DatasetName("A"), DatasetName("c")]) == [
        DatasetName("a"),
        DatasetName("B"),
        DatasetName("C"),
    ]
    # the same text as another kind of name is a different value
    assert DatasetName("x") != AccountName("x")
    assert DatasetName("x") != "x"


def test_names_cannot_be_built_invalid() -> None:
    with pytest.raises(ValidationError, match="not a valid AccountName"):
        AccountName("bad name")
    with pytest.raises(ValidationError, match="not a valid RepoName"):
        RepoName("")


# -- aliases ----------------------------------------------------------------------------------


def test_local_aliases() -> None:
    alias = DatasetAlias.parse("local.id")
    assert alias == DatasetAlias(DatasetName("local.id"))
    assert alias.account_name is None
    assert not alias.is_multi_tenant
    alias = DatasetAlias.parse("user-name/local.id")
    assert alias == DatasetAlias(DatasetName("local.id"), AccountName("user-name"))
    assert alias.is_multi_tenant
    assert str(alias) == "user-name/local.id"
    assert DatasetAlias.parse("account/net.example.com") == DatasetAlias.parse(
        "aCCouNt/net.ExaMplE.coM"
    )
    assert DatasetAlias.parse("net.example.com") != DatasetAlias.parse("account/net.example.com")
    assert alias.as_remote(RepoName("hub")) == DatasetAliasRemote.parse("hub/user-name/local.id")


INVALID_ALIASES: list[tuple[str, str]] = [
    ("repo.name/user-name/blah", "expected 'name' or 'account/name'"),
    ("user-name/.invalid", "'.invalid' is not a valid DatasetName"),
    (".invalid/local.id", "'.invalid' is not a valid AccountName"),
    ("/x", "'' is not a valid AccountName: it is empty"),
]
"""Text that is not a valid ``DatasetAlias``, and why."""


def test_remote_aliases() -> None:
    alias = DatasetAliasRemote.parse("repo.name/local.id")
    assert (alias.repo_name, alias.account_name, alias.dataset_name) == (
        RepoName("repo.name"),
        None,
        DatasetName("local.id"),
    )
    alias = DatasetAliasRemote.parse("repo.name/user-name/local.id")
    assert alias.account_name == AccountName("user-name")
    assert str(alias) == "repo.name/user-name/local.id"
    assert alias.local_alias == DatasetAlias.parse("user-name/local.id")
    assert DatasetAliasRemote.parse("repository/net.example.com") == DatasetAliasRemote.parse(
        "rEpoSitOry/net.ExaMplE.coM"
    )
    for bad in ("repo.name/.invalid", ".invalid/local.id", "repo/.bad/x", "x", "a/b/c/d"):
        with pytest.raises(ValidationError, match="is not a valid DatasetAliasRemote"):
            DatasetAliasRemote.parse(bad)


# -- references -------------------------------------------------------------------------------


def test_dataset_ref_by_id_alias_or_handle() -> None:
    by_id = DatasetRef.parse(SEEDED_KEY_BASE58)
    assert by_id == DatasetRef(SEEDED_KEY)
    assert (by_id.id, by_id.alias) == (SEEDED_KEY, None)
    assert str(by_id) == SEEDED_KEY.to_did()  # written back in base16
    by_alias = DatasetRef.parse("acc/ds")
    assert (by_alias.id, by_alias.alias) == (None, DatasetAlias.parse("acc/ds"))
    handle = DatasetHandle(SEEDED_KEY, DatasetAlias.parse("acc/ds"))
    by_handle = DatasetRef(handle)
    assert (by_handle.id, by_handle.alias) == (SEEDED_KEY, handle.alias)
    assert str(by_handle) == "acc/ds"  # a handle displays as its alias
    assert DatasetRef.parse(str(by_handle)) == by_alias


INVALID_REFS: list[tuple[str, str]] = [
    ("My Dataset", "'My Dataset' is not a valid DatasetName"),
    ("did:odf:xyz", "invalid multibase string"),
    ("did:odf:fed01", "key is 0 bytes"),
    ("r/a/b", "expected 'name' or 'account/name'"),
]
"""Text that is not a valid ``DatasetRef``, and why."""


@pytest.mark.parametrize(
    "text",
    [
        "https://opendata.ca/odf/census-2016-population/",
        "ipfs://bafkreie3hfshd4ikinnbio3kewo2hvj6doh5jp3p23iwk2evgo2un5g7km/",
        "odf+https://example.com/datasets/x",
        "odf+http://localhost:8080/x",
        "file:///home/user/.kamu/datasets/x",
        "s3://bucket/prefix/x",
        "s3+https://minio.local:9000/bucket/x",
    ],
)
def test_remote_refs_by_url(text: str) -> None:
    ref = DatasetRefRemote.parse(text)
    assert ref.url == DatasetUrl(text)
    assert (ref.id, ref.alias, ref.repo_name) == (None, None, None)
    assert str(ref) == text
    assert ref.url is not None and ref.url.scheme == text.split("://")[0]


def test_remote_refs_by_id_and_alias() -> None:
    ref = DatasetRefRemote.parse(SEEDED_KEY_BASE58)
    assert ref == DatasetRefRemote(DatasetIdRemote(SEEDED_KEY))
    assert (ref.id, ref.repo_name) == (SEEDED_KEY, None)
    ref = DatasetRefRemote.parse("repo/" + SEEDED_KEY_BASE58)
    assert (ref.id, ref.repo_name) == (SEEDED_KEY, RepoName("repo"))
    assert str(ref) == "repo/" + SEEDED_KEY.to_did()
    ref = DatasetRefRemote.parse("repo/account/dataset")
    assert ref.alias == DatasetAliasRemote.parse("repo/account/dataset")
    assert (ref.id, ref.repo_name) == (None, RepoName("repo"))
    handle = DatasetHandleRemote(SEEDED_KEY, DatasetAliasRemote.parse("hub/x"))
    by_handle = DatasetRefRemote(handle)
    assert (by_handle.id, by_handle.alias, str(by_handle)) == (SEEDED_KEY, handle.alias, "hub/x")


INVALID_REMOTE_REFS: list[tuple[str, str]] = [
    ("dataset", "expected 'repo/name' or 'repo/account/name', '[repo/]did:odf:...' or a URL"),
    ("a/b/c/d", "expected 'repo/name' or 'repo/account/name'"),
    ("repo/My Data", "'My Data' is not a valid DatasetName"),
    ("bad repo/did:odf:fed01" + "00" * 32, "'bad repo' is not a valid RepoName"),
    ("repo/did:odf:fed01", "key is 0 bytes"),
    ("http://[::1/x", "Invalid IPv6 URL"),
    ("ht_tp://host/x", "expected a URL 'scheme://...'"),
    ("https://", "expected a URL 'scheme://...'"),
    ("https://host/\nx", "expected a URL 'scheme://...'"),
]
"""Text that is not a valid ``DatasetRefRemote``, and why."""


def test_any_refs_and_the_account_or_repo_ambiguity() -> None:
    assert DatasetRefAny.parse("dataset") == DatasetRefAny(DatasetRef.parse("dataset"))
    assert DatasetRefAny.parse(SEEDED_KEY_BASE58) == DatasetRefAny(DatasetRef(SEEDED_KEY))
    assert DatasetRefAny.parse("repo/" + SEEDED_KEY_BASE58) == DatasetRefAny(
        DatasetRefRemote(DatasetIdRemote(SEEDED_KEY, RepoName("repo")))
    )
    assert DatasetRefAny.parse("repo/account/dataset") == DatasetRefAny(
        DatasetRefRemote.parse("repo/account/dataset")
    )
    url = "https://opendata.ca/odf/census-2016-population/"
    assert DatasetRefAny.parse(url) == DatasetRefAny(DatasetRefRemote(DatasetUrl(url)))

    ambiguous = DatasetRefAny.parse("mystery/dataset")
    assert ambiguous.target == DatasetAliasAmbiguous(AccountName("mystery"), DatasetName("dataset"))
    assert str(ambiguous) == "mystery/dataset"
    assert ambiguous.resolve(lambda repo: True) == DatasetRefRemote.parse("mystery/dataset")
    assert ambiguous.resolve(lambda repo: repo == RepoName("other")) == DatasetRef.parse(
        "mystery/dataset"
    )
    # unambiguous references resolve to themselves
    assert DatasetRefAny.parse("a/b/c").resolve(lambda repo: False) == DatasetRefRemote.parse(
        "a/b/c"
    )
    with pytest.raises(ValidationError, match="'foo:bar' is not a valid DatasetRefAny"):
        DatasetRefAny.parse("foo:bar")
    with pytest.raises(ValidationError, match="'a b/c' is not a valid DatasetRefAny"):
        DatasetRefAny.parse("a b/c")


# -- properties: parse(str(x)) == x -------------------------------------------------------------

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_subdomains = st.lists(st.text(_ALNUM, min_size=1, max_size=4), min_size=1, max_size=3).map(
    "-".join
)
hostnames = st.lists(_subdomains, min_size=1, max_size=4).map(".".join)
ids = st.binary(min_size=32, max_size=32).map(DatasetID.from_public_key)
names = hostnames.map(DatasetName)
aliases = st.builds(DatasetAlias, names, st.none() | hostnames.map(AccountName))
remote_aliases = st.builds(
    DatasetAliasRemote, hostnames.map(RepoName), names, st.none() | hostnames.map(AccountName)
)
urls = st.builds(
    lambda scheme, rest: DatasetUrl(f"{scheme}://{rest}"),
    st.sampled_from(["https", "http", "odf+https", "file", "s3", "ipfs", "s3+http"]),
    st.text(st.characters(exclude_characters="\n", exclude_categories=["Cs"]), min_size=1).filter(
        lambda s: "[" not in s and "]" not in s
    ),
)
local_refs = st.builds(DatasetRef, ids | aliases)
remote_refs = st.builds(
    DatasetRefRemote,
    st.builds(DatasetIdRemote, ids, st.none() | hostnames.map(RepoName)) | remote_aliases | urls,
)


@given(hostnames)
def test_any_hostname_is_a_name_and_keeps_its_spelling(text: str) -> None:
    assert re.fullmatch(HOSTNAME_PATTERN, text)
    name = DatasetName.parse(text)
    assert str(name) == text
    assert DatasetName.parse(text.swapcase()) == name
    assert hash(DatasetName.parse(text.upper())) == hash(name)


@given(st.text(max_size=12))
def test_any_text_is_a_name_or_a_validation_error(text: str) -> None:
    try:
        name = DatasetName.parse(text)
    except ValidationError as e:
        assert str(e).startswith(f"{text!r} is not a valid DatasetName: ")
    else:
        assert re.fullmatch(HOSTNAME_PATTERN, text, re.ASCII)
        assert str(name) == text


@given(aliases)
def test_alias_round_trip(alias: DatasetAlias) -> None:
    assert DatasetAlias.parse(str(alias)) == alias
    assert DatasetRef.parse(str(alias)) == DatasetRef(alias)


@given(remote_aliases)
def test_remote_alias_round_trip(alias: DatasetAliasRemote) -> None:
    assert DatasetAliasRemote.parse(str(alias)) == alias


@given(local_refs)
def test_local_ref_round_trip(ref: DatasetRef) -> None:
    assert DatasetRef.parse(str(ref)) == ref
    any_ref = DatasetRefAny.parse(str(ref))
    assert str(any_ref) == str(ref)
    assert any_ref.resolve(lambda repo: False) == ref


@given(remote_refs)
def test_remote_ref_round_trip(ref: DatasetRefRemote) -> None:
    assert DatasetRefRemote.parse(str(ref)) == ref
    any_ref = DatasetRefAny.parse(str(ref))
    assert str(any_ref) == str(ref)
    target = ref.target
    if isinstance(target, DatasetIdRemote) and target.repo_name is None:
        assert any_ref.resolve(lambda repo: True) == DatasetRef(target.id)  # a local ID
    else:
        assert any_ref.resolve(lambda repo: True) == ref


@given(st.text(max_size=40))
def test_any_text_is_a_ref_or_a_validation_error(text: str) -> None:
    for kind in (DatasetRef, DatasetRefRemote, DatasetRefAny):
        try:
            ref = kind.parse(text)
        except ValidationError as e:
            assert str(e).startswith(f"{text!r} is not a valid ")
        else:
            assert kind.parse(str(ref)) == ref


@pytest.mark.parametrize(
    ("cls", "text", "reason"),
    [
        *((DatasetName, text, reason) for text, reason in INVALID_NAMES),
        *((DatasetAlias, text, reason) for text, reason in INVALID_ALIASES),
        *((DatasetRef, text, reason) for text, reason in INVALID_REFS),
        *((DatasetRefRemote, text, reason) for text, reason in INVALID_REMOTE_REFS),
    ],
)
def test_invalid_text_is_refused_saying_why(cls: Any, text: str, reason: str) -> None:
    """``cls.parse(text)`` fails saying that ``text`` is not a valid ``cls``, and ``reason``."""
    with pytest.raises(ValidationError) as err:
        cls.parse(text)
    assert str(err.value).startswith(f"{text!r} is not a valid {cls.__name__}: ")
    assert reason in str(err.value)
