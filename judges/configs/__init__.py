"""Judge configs: their versions, forms and the prompt preview."""
