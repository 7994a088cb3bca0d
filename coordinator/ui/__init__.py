"""The web UI the daemon serves on its HTTP address (``/ui/``; ``odf ui`` opens it).

Pages are rendered on the server (``pages``, through the escaping ``html`` helper) from the
application's caches; the browser gets plain ES modules and CSS shipped in ``static/`` (no
build step, nothing from another origin). ``server.WebUi`` routes the requests, ``sessions``
logs people in and guards against cross-site requests, ``live`` streams commits and job
progress as server-sent events, ``lineage_svg`` draws the lineage graph.
"""
