"""The container entrypoint of the evalgate GitHub Action (``python -m entrypoint.main``)."""
