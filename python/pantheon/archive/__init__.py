"""The results archive (issue 20; the original Pantheon's pantheon.stanford.edu, Yan et al., ATC 2018,
§3.2): a website and a JSON API where data dirs are uploaded, found, compared and downloaded.

    db.py          the database: a URL in, an engine out (SQLite by default, PostgreSQL by URL)
    models.py      the tables: results, their schemes, runs, flows and files; leagues; upload tokens
    migrations/    Alembic's schema history, applied at every `pantheon archive serve`
    tokens.py      upload tokens: made once, stored as a hash, revoked by name
    store.py       the content-addressed file store (sha256 → path)
    staging.py     an upload's body unpacked with every tar member checked, and its manifest verified
    upload.py      an unpacked data dir re-analysed, checked against its perf.json, committed
    leagues.py     a league dir (pantheon league) checked against its contract, committed, shown and compared
    stats.py       mean, standard deviation, Student-t 95% confidence interval, the summary score
    queries.py     the filters of the find page and the API, as one SQL query
    views.py       what a page and the API show of a result (one dict each, shared by both)
    api.py         the JSON API, the downloads and the bulk export
    pages.py       the server-rendered pages (templates/)
    app.py         the ASGI application: routes, limits, start-up
    client.py      `pantheon archive upload`: the data dir as a tar.gz with its MANIFEST.json
    cli.py         `pantheon archive serve | token create | token revoke | upload`
"""
