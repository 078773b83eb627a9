"""Model calls as the components see them: routing a purpose (summary, flush, consolidation)
to its backend (:mod:`~harnessmem.models.routes`), the metered model, the usage ledger and
budget (:mod:`~harnessmem.models.usage`, :mod:`~harnessmem.models.ledger`,
:mod:`~harnessmem.models.report`), back-off after failures and recognising context-overflow
errors (private helpers)."""
