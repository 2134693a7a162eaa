"""Hosting the page: the policy that the page's guards (:mod:`mars_demo.ui.guards`) enforce on
the server. :mod:`~mars_demo.hosting.access` says what a visitor of a served page may do (limits
per client and per network, the models allowed), :mod:`~mars_demo.hosting.clients` who a visitor
is (the client of a request from what the proxy adds, allowances over time, the page's host
names), :mod:`~mars_demo.hosting.zerogpu` ZeroGPU's start-up and durations.

None of it imports gradio or torch: ``app.py`` reads ZeroGPU's settings before anything touches
CUDA, and the command line's ``serve`` builds the policy before the page exists.
"""
