//! The door on the memory store: every answer of the module's table.
