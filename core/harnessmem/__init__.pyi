# The public names of harnessmem, each declared once: type checkers read this file, and
# harnessmem/__init__.py builds the lazy exports and __all__ from it (lazy_loader).
from .backends.base import Completion as Completion
from .backends.base import IndexBackend as IndexBackend
from .backends.base import ModelBackend as ModelBackend
from .backends.base import ModelRequest as ModelRequest
from .backends.base import SearchHit as SearchHit
from .backends.base import SearchRequest as SearchRequest
from .errors import BackendNotFound as BackendNotFound
from .errors import ConfigError as ConfigError
from .errors import ContextOverflowError as ContextOverflowError
from .errors import ForgetError as ForgetError
from .errors import HarnessMemError as HarnessMemError
from .errors import LeaseError as LeaseError
from .errors import MessageFormatError as MessageFormatError
from .errors import ModelError as ModelError
from .errors import ModelResponseError as ModelResponseError
from .errors import ModelUnavailableError as ModelUnavailableError
from .errors import PathNotAllowed as PathNotAllowed
from .errors import PluginError as PluginError
from .errors import WorkspaceError as WorkspaceError
from .errors import WorkspaceFileNotFound as WorkspaceFileNotFound
from .events import BudgetExceededEvent as BudgetExceededEvent
from .events import CompactionResult as CompactionResult
from .events import ContextOverBudgetEvent as ContextOverBudgetEvent
from .events import MaintenanceEvent as MaintenanceEvent
from .events import MemoryConsolidatedEvent as MemoryConsolidatedEvent
from .events import MemoryFlushedEvent as MemoryFlushedEvent
from .events import ToolResultEvictedEvent as ToolResultEvictedEvent
from .events import TurnContext as TurnContext
from .harness import MemoryHarness as MemoryHarness
from .harness import Session as Session
from .index import ReindexResult as ReindexResult
from .kernel import Kernel as Kernel
from .maintenance import MaintenanceReport as MaintenanceReport
from .memory.consolidation import ConsolidationResult as ConsolidationResult
from .memory.consolidation import SaveResult as SaveResult
from .memory.erasure import ForgetResult as ForgetResult
from .memory.flush import FlushResult as FlushResult
from .memory.provenance import FactTrace as FactTrace
from .models.usage import UsageReport as UsageReport
from .plugins import hookimpl as hookimpl
from .pool import HarnessPool as HarnessPool
from .settings import HarnessSettings as HarnessSettings
from .workspace.store import WorkspaceStore as WorkspaceStore

__version__: str
