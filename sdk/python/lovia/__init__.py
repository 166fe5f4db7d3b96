"""Write lovia tools in Python (docs/python.md in the lovia repository).

```python
from typing import Annotated
from lovia import tool, Field, ToolError

@tool
def lookup_order(order_id: Annotated[str, Field(pattern=r"^A-[0-9]+$")]) -> dict:
    \"\"\"Look an order up by id.\"\"\"
    ...
```

`lovia build tools.py -o tools.wasm` (or `python -m lovia build`, the
same build) turns the file into a sandboxed WebAssembly component with
componentize-py. A tool returns a `str` (text), `Content` (text, images
and links) or anything JSON-serialisable.
"""

from ._content import Content
from ._context import RunContext, Store
from ._errors import BudgetExceeded, DeclarationError, InvalidToolArguments, RunCancelled, ToolError
from ._fields import Field
from ._info import plugin
from ._tool import tool

__all__ = [
    "BudgetExceeded", "Content", "DeclarationError", "Field", "InvalidToolArguments", "RunCancelled", "RunContext", "Store",
    "ToolError", "plugin", "tool",
]
