"""Model calls as the components see them: routing a purpose (summary, flush, consolidation)
to its backend (:mod:`~harnessmem.models.routes`), the usage ledger and budget
(:mod:`~harnessmem.models.usage`), back-off after failures and recognising context-overflow
errors (private helpers)."""
