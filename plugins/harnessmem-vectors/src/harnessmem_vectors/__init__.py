"""harnessmem-vectors: a hybrid full-text and embeddings index for harnessmem.

Select it with ``index.backend = "vectors"``; its options are
:class:`~harnessmem_vectors.options.VectorIndexOptions`.
"""

from harnessmem_vectors.index import VectorIndex
from harnessmem_vectors.options import VectorIndexOptions

__all__ = ["VectorIndex", "VectorIndexOptions"]
