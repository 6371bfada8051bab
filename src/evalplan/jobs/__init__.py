"""Jobs as a resource (``/v1/jobs``) and the list of every module that registers job handlers."""
