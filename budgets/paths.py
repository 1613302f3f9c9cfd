"""Budget paths: a node's path is its ancestors' slugs and its own, joined by the separator
("prog-a/proj-a1"). The separator lives here so that the models and the permission rules
share it without importing each other."""

PATH_SEPARATOR = "/"
