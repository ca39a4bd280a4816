//! Who is asking: the principal an authenticated request acts as. Tasks,
//! `requestState` and quotas are scoped to it.

use serde::{Deserialize, Serialize};

/// A caller, from the request's authenticated context: the tenant and the
/// principal within it. Every task belongs to one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub tenant: String,
    pub principal: String,
}
