"""Server-rendered pages under ``/ui/`` and the offline API docs (``/docs``, ``/redoc``).

Pages read the same domain services as the API (no second copy of any logic), render with
Jinja2, draw charts with :mod:`evalplan.charts`, and load nothing from the internet.
"""
