"""The JSON API for captures and groups (contract 3) and its OpenAPI description."""
