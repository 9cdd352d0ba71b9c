"""The knowledge base's entries: one Markdown file each, with YAML front matter (id, title,
tasks, transforms, invariants, keywords, hint). A package so that the files ship as package
data."""
