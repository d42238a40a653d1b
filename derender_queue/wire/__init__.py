"""How jobs and results travel through Redis (wire format v1): key names
(`keys`), values (`envelope`), producer operations (`queue`), the result
waiter, the Python client, worker heartbeats and the streaming helper.
Imports neither tokenizers nor arq."""
