"""Helpers shared by the test tiers: the ``odf`` CLI runner and workspace builders."""
