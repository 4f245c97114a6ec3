"""nbgrader's front end: the preprocessors and exporter nbgrader_config.py names (`plugin`), the history its
autograde keeps (`regrades`) and its gradebook for an LMS (`lms`)."""
