"""Write lovia tools in Python (docs/python.md in the lovia repository).

```python
from typing import Annotated
from lovia import tool, Field, ToolError

@tool
def lookup_order(order_id: Annotated[str, Field(pattern=r"^A-[0-9]+$")]) -> dict:
    \"\"\"Look an order up by id.\"\"\"
    ...
```

`python -m lovia build tools.py -o tools.wasm` turns the file into a
sandboxed WebAssembly component with componentize-py.
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
