//! One module per command.

pub(crate) mod account;
pub(crate) mod explain;
pub(crate) mod forget;
pub(crate) mod redrive;
