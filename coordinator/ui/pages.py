"""The UI's pages, rendered on the server from the application (the datasets' state caches and
chains: no engine starts to show a page). Every value goes through ``html.render``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from common.humanize import human_time, human_value
from common.odf.errors import OdfError
from common.odf.events import AddData, ExecuteTransform
from common.odf.fragments import TransformSql
from coordinator.ui.html import Html, escape, join, render
from coordinator.ui.lineage_svg import dataset_url, lineage_svg
from coordinator.ui.markdown import render_markdown

if TYPE_CHECKING:
    import pyarrow as pa

    from common.odf.block import MetadataBlock
    from common.odf.multihash import Multihash
    from coordinator.app import Application, DatasetSummary
    from coordinator.dataset import Dataset
    from coordinator.transform.lineage import Lineage

LIST_PAGE = 50
HISTORY_PAGE = 50
DATA_PAGE = 50
TABS = ("overview", "schema", "data", "history", "lineage")
SORTS = ("name", "kind", "records", "size", "updated", "watermark", "verified")


@dataclass(frozen=True, slots=True)
class Verified:
    """The outcome of the last verification from the UI."""

    head: str | None
    ok: bool
    at: datetime
    summary: str


# --- formatting --------------------------------------------------------------------------------


def size_text(size: int | None) -> str:
    if size is None:
        return ""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(size)


def age_text(when: datetime | None, now: datetime | None = None) -> str:
    if when is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - when).total_seconds()))
    for unit, length in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= length:
            return f"{seconds // length} {unit} ago"
    return f"{seconds} s ago"


def time_text(when: datetime | None) -> str:
    return human_time(when) if when is not None else ""


def verified_text(verified: Verified | None, head: Multihash | None) -> str:
    if verified is None:
        return "not verified"
    if head is None or verified.head != head.to_multibase():
        return "changed since verified"
    return "verified" if verified.ok else "FAILED"


def link(path: str, **query: object) -> str:
    shown = {k: str(v) for k, v in query.items() if v not in (None, "")}
    return path + ("?" + urlencode(shown) if shown else "")


# --- the frame ---------------------------------------------------------------------------------


def page(title: str, body: Html, *, csrf: str | None, scope: str | None = None) -> Html:
    """A whole document: the header (when logged in), ``body``, the UI's script and style."""
    header = Html("")
    if csrf is not None:
        header = render(
            '<header><a class="brand" href="/ui/">ODF</a><nav><a href="/ui/">Datasets</a>'
            ' <a href="/ui/lineage">Lineage</a> <a href="/ui/sql">SQL</a></nav>'
            '<span class="who">$scope</span>'
            '<button type="button" id="logout">Log out</button>'
            '<span id="live" class="live" title="live updates">\u25cf</span></header>',
            scope=scope or "",
        )
    return render(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="csrf-token" content="$csrf"><title>$title \u2014 ODF</title>'
        '<link rel="stylesheet" href="/ui/static/ui.css">'
        '<script type="module" src="/ui/static/ui.js"></script></head>'
        "<body>$header<main>$body</main></body></html>",
        csrf=csrf or "",
        title=title,
        header=header,
        body=body,
    )


def login_page(error: str | None) -> Html:
    message = render('<p class="error" role="alert">$e</p>', e=error) if error else Html("")
    return page(
        "Log in",
        render(
            '<section class="login"><h1>Open Data Fabric</h1>$message'
            '<form method="post" action="/ui/login"><label>Daemon token'
            ' <input type="password" name="token" autocomplete="off" required autofocus></label>'
            '<button type="submit">Log in</button></form>'
            '<p class="hint">The token is in <code>.odf/run/token</code>, or run'
            " <code>odf ui</code> for a one-time link.</p></section>",
            message=message,
        ),
        csrf=None,
    )


def message_page(title: str, text: str, *, csrf: str | None) -> Html:
    return page(title, render("<h1>$t</h1><p>$x</p>", t=title, x=text), csrf=csrf)


# --- the dataset list --------------------------------------------------------------------------


def _sort_key(sort: str, verified: dict[str, Verified]) -> Any:
    def key(s: DatasetSummary) -> Any:
        if sort == "verified":
            return verified_text(verified.get(s.name), s.head)
        value = getattr(s, sort)
        return (value is None, value if value is not None else 0)

    return key


def dataset_list(
    summaries: Sequence[DatasetSummary],
    verified: dict[str, Verified],
    *,
    search: str,
    sort: str,
    descending: bool,
    page_no: int,
) -> tuple[Html, int]:
    """The list's body, and how many datasets match."""
    needle = search.lower()
    shown = [s for s in summaries if needle in s.name.lower() or needle in (s.kind or "").lower()]
    shown.sort(key=lambda s: s.name.lower())
    if sort != "name":
        shown.sort(key=_sort_key(sort, verified), reverse=descending)
    elif descending:
        shown.reverse()
    pages = max(1, -(-len(shown) // LIST_PAGE))
    page_no = min(max(page_no, 1), pages)
    now = datetime.now(UTC)
    rows = []
    for s in shown[(page_no - 1) * LIST_PAGE : page_no * LIST_PAGE]:
        rows.append(
            render(
                '<tr data-dataset="$name"><td><a href="$url">$name</a>$error</td><td>$kind</td>'
                '<td class="num" data-field="records">$records</td>'
                '<td class="num" data-field="size">$size</td>'
                '<td data-field="updated" title="$updated_at">$age</td>'
                '<td data-field="watermark">$watermark</td>'
                '<td data-field="verified" class="$vclass">$verified</td></tr>',
                name=s.name,
                url=dataset_url(s.name),
                error=render(' <span class="error">$e</span>', e=s.error) if s.error else "",
                kind=s.kind or "",
                records=s.records if s.records is not None else "",
                size=size_text(s.size),
                updated_at=time_text(s.updated),
                age=age_text(s.updated, now),
                watermark=time_text(s.watermark),
                verified=(v := verified_text(verified.get(s.name), s.head)),
                vclass="bad" if v == "FAILED" else "",
            )
        )
    headers = []
    for column, label in zip(
        SORTS,
        ("Name", "Kind", "Records", "Size", "Head age", "Watermark", "Verification"),
        strict=True,
    ):
        flip = column == sort and not descending
        mark = (" \u25bc" if descending else " \u25b2") if column == sort else ""
        url = link("/ui/", q=search, sort=column, desc="1" if flip else "")
        headers.append(render('<th><a href="$u">$l$m</a></th>', u=url, l=label, m=mark))
    nav = _pager(
        page_no,
        pages,
        lambda n: link("/ui/", q=search, sort=sort, desc="1" if descending else "", page=n),
    )
    body = render(
        '<h1>Datasets <span class="count">$count</span></h1>'
        '<form class="search" method="get" action="/ui/"><input type="search" name="q"'
        ' value="$search" placeholder="search names and kinds">'
        '<input type="hidden" name="sort" value="$sort"><button type="submit">Search</button>'
        '</form><table class="datasets" data-live="list"><thead><tr>$headers</tr></thead>'
        "<tbody>$rows</tbody></table>$nav",
        count=len(shown),
        search=search,
        sort=sort,
        headers=join(headers),
        rows=join(rows) or Html('<tr><td colspan="7">no datasets</td></tr>'),
        nav=nav,
    )
    return body, len(shown)


def _pager(page_no: int, pages: int, url: Any) -> Html:
    if pages <= 1:
        return Html("")
    parts = []
    if page_no > 1:
        parts.append(render('<a rel="prev" href="$u">\u2190 previous</a>', u=url(page_no - 1)))
    parts.append(render("<span>page $n of $m</span>", n=page_no, m=pages))
    if page_no < pages:
        parts.append(render('<a rel="next" href="$u">next \u2192</a>', u=url(page_no + 1)))
    return render('<nav class="pager">$p</nav>', p=join(parts, " "))


# --- a dataset ---------------------------------------------------------------------------------


def dataset_header(s: DatasetSummary, verified: Verified | None, tab: str, admin: bool) -> Html:
    tabs = join(
        render(
            '<a href="$u" class="$c">$t</a>',
            u=link(dataset_url(s.name), tab=t),
            c="active" if t == tab else "",
            t=t.capitalize(),
        )
        for t in TABS
    )
    pull = (
        render('<button type="button" data-action="pull" data-dataset="$n">Pull</button>', n=s.name)
        if admin
        else Html("")
    )
    return render(
        '<div class="dataset-head" data-dataset="$name"><h1>$name <span class="kind">$kind</span>'
        '</h1><dl class="facts"><dt>Records</dt><dd data-field="records">$records</dd>'
        '<dt>Blocks</dt><dd data-field="blocks">$blocks</dd>'
        '<dt>Size</dt><dd data-field="size">$size</dd>'
        '<dt>Head</dt><dd data-field="head" class="hash">$head</dd>'
        '<dt>Updated</dt><dd data-field="updated">$updated</dd>'
        '<dt>Watermark</dt><dd data-field="watermark">$watermark</dd>'
        '<dt>Verification</dt><dd data-field="verified">$verified</dd></dl>'
        '<div class="actions"><button type="button" data-action="verify" data-dataset="$name">'
        'Verify</button> $pull</div><div class="job" hidden><progress></progress>'
        '<ol class="job-lines"></ol></div></div><nav class="tabs">$tabs</nav>',
        name=s.name,
        kind=s.kind or "",
        records=s.records if s.records is not None else "",
        blocks=s.blocks if s.blocks is not None else "",
        size=size_text(s.size),
        head=s.head.to_multibase() if s.head else "",
        updated=time_text(s.updated),
        watermark=time_text(s.watermark),
        verified=verified_text(verified, s.head),
        pull=pull,
        tabs=tabs,
    )


def overview(app: Application, name: str) -> Html:
    from common.serde.yaml_codec import dump_yaml
    from common.serde.yaml_plain import to_plain

    state = app.dataset(name).state()
    parts = []
    info = state.info
    if info is not None and info.description:
        parts.append(
            render('<section class="description">$d</section>', d=render_markdown(info.description))
        )
    if info is not None and info.keywords:
        chips = join(render('<li class="keyword">$k</li>', k=k) for k in info.keywords)
        parts.append(render('<h2>Keywords</h2><ul class="keywords">$c</ul>', c=chips))
    lic = state.license
    if lic is not None:
        parts.append(
            render(
                '<h2>License</h2><p class="license">$short \u2014 $name$spdx $site</p>',
                short=lic.short_name,
                name=lic.name,
                spdx=f" (SPDX {lic.spdx_id})" if lic.spdx_id else "",
                site=_external_link(lic.website_url),
            )
        )
    if state.attachments is not None:
        for item in state.attachments.attachments.items:
            body = (
                render_markdown(item.content)
                if item.path.lower().endswith((".md", ".markdown"))
                else render("<pre>$c</pre>", c=item.content)
            )
            parts.append(
                render('<h2>$p</h2><section class="attachment">$b</section>', p=item.path, b=body)
            )
    if state.polling_source is not None:
        parts.append(_yaml_section("Polling source", dump_yaml(to_plain(state.polling_source))))
    for push in state.push_sources:
        parts.append(_yaml_section(f"Push source {push.source_name}", dump_yaml(to_plain(push))))
    if state.transform is not None:
        t = state.transform
        inputs = join(
            render(
                '<li><a href="$u">$a</a></li>',
                u=dataset_url(_input_name(app, i.dataset_ref) or i.alias or ""),
                a=i.alias,
            )
            for i in t.inputs
        )
        parts.append(render("<h2>Inputs</h2><ul>$i</ul>", i=inputs))
        if isinstance(t.transform, TransformSql):
            for step in t.transform.steps():
                label = step.alias or "query"
                parts.append(
                    render(
                        "<h2>Transform ($engine): $label</h2>"
                        '<pre class="sql"><code>$sql</code></pre>',
                        engine=t.transform.engine,
                        label=label,
                        sql=highlight_sql(step.query),
                    )
                )
    if not parts:
        parts.append(Html("<p>No description, license, source or transform recorded.</p>"))
    return join(parts)


def _input_name(app: Application, ref: str) -> str | None:
    try:
        return app.dataset(ref).alias
    except Exception:
        return None


def _external_link(url: str) -> Html:
    if not url.lower().startswith(("https://", "http://")):
        return escape(url)
    return render('<a href="$u" rel="noopener noreferrer">$u</a>', u=url)


def _yaml_section(title: str, text: str) -> Html:
    return render('<h2>$t</h2><pre class="yaml">$y</pre>', t=title, y=text)


_SQL_TOKENS = re.compile(
    r"(?P<comment>--[^\n]*|/\*.*?\*/)|(?P<string>'(?:[^']|'')*')|(?P<quoted>`[^`]*`|\"[^\"]*\")"
    r"|(?P<number>\b\d+(?:\.\d+)?\b)|(?P<word>\b[A-Za-z_][A-Za-z0-9_]*\b)",
    re.DOTALL,
)
_SQL_KEYWORDS = frozenset(
    [
        "select",
        "from",
        "where",
        "group",
        "by",
        "order",
        "having",
        "limit",
        "join",
        "left",
        "right",
        "inner",
        "outer",
        "full",
        "cross",
        "on",
        "as",
        "and",
        "or",
        "not",
        "in",
        "is",
        "null",
        "case",
        "when",
        "then",
        "else",
        "end",
        "distinct",
        "union",
        "all",
        "with",
        "over",
        "partition",
        "rows",
        "range",
        "between",
        "interval",
        "asc",
        "desc",
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "cast",
        "true",
        "false",
        "like",
        "exists",
        "window",
        "preceding",
        "following",
        "current",
        "row",
    ]
)


def highlight_sql(sql: str) -> Html:
    """SQL text with keywords, strings, numbers and comments in spans (all escaped)."""
    out: list[Html] = []
    at = 0
    for m in _SQL_TOKENS.finditer(sql):
        out.append(escape(sql[at : m.start()]))
        kind = m.lastgroup or ""
        text = m.group()
        if kind == "word":
            kind = "kw" if text.lower() in _SQL_KEYWORDS else ""
        out.append(render('<span class="$k">$t</span>', k=kind, t=text) if kind else escape(text))
        at = m.end()
    out.append(escape(sql[at:]))
    return join(out)


def schema_tab(schema: pa.Schema | None) -> Html:
    if schema is None:
        return Html("<p>No schema yet (the first ingest or transform sets it).</p>")
    rows = join(
        render(
            "<tr><td>$n</td><td><code>$t</code></td><td>$null</td></tr>",
            n=f.name,
            t=str(f.type),
            null="yes" if f.nullable else "no",
        )
        for f in schema
    )
    return render(
        '<table class="schema"><thead><tr><th>Column</th><th>Type</th><th>Nullable</th></tr>'
        "</thead><tbody>$r</tbody></table>",
        r=rows,
    )


def table_html(table: pa.Table, *, css: str = "data") -> Html:
    names = table.column_names
    head = join(render("<th>$n</th>", n=n) for n in names)
    columns = [table.column(i).to_pylist() for i in range(len(names))]
    rows = join(
        render(
            "<tr>$c</tr>", c=join(render("<td>$v</td>", v=human_value(col[r])) for col in columns)
        )
        for r in range(table.num_rows)
    )
    return render(
        '<table class="$css"><thead><tr>$h</tr></thead><tbody>$r</tbody></table>',
        css=css,
        h=head,
        r=rows,
    )


def data_tab(app: Application, name: str, page_no: int, as_of: str) -> Html:
    ds = app.dataset(name)
    start = block_ref(ds, as_of, path="as_of") if as_of else None
    page_no = max(page_no, 1)
    skip = (page_no - 1) * DATA_PAGE
    table = app.tail(name, DATA_PAGE, skip=skip, as_of=start)
    base = dataset_url(name)

    def url(n: int) -> str:
        return link(base, tab="data", page=n, as_of=as_of)

    nav = []
    if page_no > 1:
        nav.append(render('<a rel="prev" href="$u">\u2190 newer</a>', u=url(page_no - 1)))
    nav.append(render("<span>page $n</span>", n=page_no))
    if table.num_rows == DATA_PAGE:
        nav.append(render('<a rel="next" href="$u">older \u2192</a>', u=url(page_no + 1)))
    return render(
        '<form class="as-of" method="get" action="$base">'
        '<input type="hidden" name="tab" value="data"><label>As of block <input name="as_of"'
        ' value="$as_of" placeholder="hash or prefix (default: head)"'
        ' size="40"></label><button type="submit">Show</button></form>'
        '<p class="hint">The latest records$when, newest last; system columns included.</p>'
        '$table<nav class="pager">$nav</nav>',
        base=base,
        as_of=as_of,
        when=f" as of block {start.to_multibase()}" if start else "",
        table=table_html(table),
        nav=join(nav, " "),
    )


def block_ref(ds: Dataset, text: str, *, path: str) -> Multihash:
    """The block ``text`` names: a whole hash of a stored block at once (the pager's links),
    else a unique prefix of one of the chain (``Dataset.find_block``)."""
    from common.odf.multihash import Multihash

    try:
        whole = Multihash.from_multibase(text)
    except (OdfError, ValueError):
        whole = None
    if whole is not None and ds.layout.block_path(whole).is_file():
        return whole
    return ds.find_block(text, path=path)


def history_tab(app: Application, name: str, start: str) -> Html:
    """The chain from block ``start`` (default: the head), ``HISTORY_PAGE`` blocks a page;
    from the head, new blocks are added on top as they are committed (``ui.js``)."""
    ds = app.dataset(name)
    at = block_ref(ds, start, path="from") if start else None
    blocks: list[tuple[Multihash, MetadataBlock]] = list(
        islice(ds.iter_blocks(at), HISTORY_PAGE + 1)
    )
    more = blocks[HISTORY_PAGE][0] if len(blocks) > HISTORY_PAGE else None
    items = [_block_html(block_facts(h, b)) for h, b in blocks[:HISTORY_PAGE]]
    base = dataset_url(name)
    nav = [render('<a href="$u">newest</a>', u=link(base, tab="history"))] if start else []
    if more is not None:
        nav.append(
            render(
                '<a rel="next" href="$u">older \u2192</a>',
                u=link(base, tab="history", **{"from": more.to_multibase()}),
            )
        )
    top = blocks[0][0].to_multibase() if blocks and not start else ""
    return render(
        '<div class="history" data-live="history" data-top="$top">$i</div>'
        '<nav class="pager">$n</nav>',
        top=top,
        i=join(items),
        n=join(nav, " "),
    )


def newer_blocks(app: Application, name: str, after: str) -> list[dict[str, Any]]:
    """The facts of the blocks above ``after`` (at most a page), newest first."""
    found = []
    for h, block in islice(app.dataset(name).iter_blocks(), HISTORY_PAGE):
        if h.to_multibase() == after:
            break
        found.append(block_facts(h, block))
    return found


def block_facts(h: Multihash, block: MetadataBlock) -> dict[str, Any]:
    """What the history shows of one block (the page's HTML and the live JSON alike)."""
    from common.serde.yaml_codec import dump_yaml
    from common.serde.yaml_plain import to_plain

    event = block.event
    files = []
    if isinstance(event, AddData | ExecuteTransform):
        if event.new_data is not None:
            d = event.new_data
            files.append(
                [
                    "data",
                    size_text(d.size),
                    f"{d.offset_interval.start}..{d.offset_interval.end}",
                    d.logical_hash.to_multibase(),
                    d.physical_hash.to_multibase(),
                ]
            )
        if event.new_checkpoint is not None:
            c = event.new_checkpoint
            checkpoint = ["checkpoint", size_text(c.size), "", "", c.physical_hash.to_multibase()]
            files.append(checkpoint)
    return {
        "seq": block.sequence_number,
        "kind": type(event).__name__,
        "time": time_text(block.system_time),
        "hash": h.to_multibase(),
        "files": files,
        "yaml": dump_yaml(to_plain(event)),
    }


FILE_COLUMNS = ("file", "size", "offsets", "logical hash", "physical hash")


def _block_html(facts: dict[str, Any]) -> Html:
    files = Html("")
    if facts["files"]:
        files = render(
            '<table class="files"><thead><tr>$h</tr></thead><tbody>$r</tbody></table>',
            h=join(render("<th>$c</th>", c=c) for c in FILE_COLUMNS),
            r=join(
                render("<tr>$c</tr>", c=join(render("<td>$v</td>", v=v) for v in row))
                for row in facts["files"]
            ),
        )
    return render(
        '<article class="block"><header><span class="seq">#$seq</span>'
        " <strong>$kind</strong> <time>$time</time></header>"
        '<p class="hash">block $hash</p>$files<details><summary>event</summary>'
        '<pre class="yaml">$yaml</pre></details></article>',
        seq=facts["seq"],
        kind=facts["kind"],
        time=facts["time"],
        hash=facts["hash"],
        files=files,
        yaml=facts["yaml"],
    )


def lineage_graph(lineage: Lineage, current: str | None) -> Html:
    """The graph of ``lineage`` (a dataset's, with ``current`` marked, or the workspace's);
    each dataset of the workspace links to its own lineage."""
    present = {n.name for n in lineage.nodes if n.kind != "external"}
    svg = lineage_svg(
        [(n.name, n.kind) for n in lineage.nodes],
        [(e.source, e.target) for e in lineage.edges],
        current=current,
        link=lambda n: link(dataset_url(n), tab="lineage") if n in present else None,
    )
    return render(
        '<p class="hint">Inputs on the left, dependents on the right; each dataset links to'
        ' its page.</p><div class="graph">$svg</div>',
        svg=svg,
    )


def sql_page(datasets: Sequence[tuple[str, Sequence[str]]], sql: str) -> Html:
    names = join(
        render(
            '<li><button type="button" class="insert" data-text="$n">$n</button>$cols</li>',
            n=n,
            cols=render(
                "<ul>$c</ul>",
                c=join(
                    render(
                        '<li><button type="button" class="insert" data-text="$c">$c</button></li>',
                        c=c,
                    )
                    for c in cols
                ),
            ),
        )
        for n, cols in datasets
    )
    return render(
        '<h1>SQL</h1><div class="sql-console"><aside class="catalog"><h2>Datasets</h2>'
        '<ul>$names</ul></aside><section><form id="sql-form"><textarea id="sql" name="sql"'
        ' rows="8" spellcheck="false"'
        ' placeholder="SELECT * FROM dataset LIMIT 10">$sql</textarea>'
        '<ul id="sql-suggest" class="suggest" role="listbox" hidden></ul><div class="actions">'
        '<button type="submit">Run</button> <a id="download-csv" href="#">CSV</a>'
        ' <a id="download-parquet" href="#">Parquet</a></div></form>'
        '<pre id="sql-error" class="error" hidden></pre><p id="sql-status" class="hint"></p>'
        '<div id="sql-result"></div><nav class="pager" id="sql-pager" hidden>'
        '<button type="button" id="sql-prev">\u2190 previous</button> <span id="sql-page"></span>'
        ' <button type="button" id="sql-next">next \u2192</button></nav></section></div>',
        names=names,
        sql=sql,
    )
