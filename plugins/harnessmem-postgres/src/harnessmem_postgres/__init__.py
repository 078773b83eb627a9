"""harnessmem-postgres: a PostgreSQL full-text index shared by every replica of a workspace.

Select it with ``index.backend = "postgres"``; its options are
:class:`~harnessmem_postgres.options.PostgresIndexOptions`.
"""

from harnessmem_postgres.index import IndexUnavailable, PostgresIndex
from harnessmem_postgres.options import PostgresIndexOptions

__all__ = ["IndexUnavailable", "PostgresIndex", "PostgresIndexOptions"]
