"""Static coresets (``/v1/coresets``): the service, persistence, export and predict; the method
families in ``families/`` and their registry in ``registry``."""
