//! Builder-style setters for the option structs.
//!
//! The option structs ([`crate::HostConfig`], [`crate::ExecSettings`],
//! [`crate::CallLimits`], [`crate::plugin::config::PluginConfig`]) are
//! `#[non_exhaustive]`, so that a new option is not a breaking change;
//! another crate cannot write them as struct literals, and builds them from
//! `default()` with one setter per field, `with_` and the field's name,
//! instead:
//!
//! ```
//! use lovia_host::HostConfig;
//! let config = HostConfig::default().with_pool_slots(16).with_fuel_metering(true);
//! assert_eq!(config.pool_slots, 16);
//! ```
//!
//! A macro of ours rather than a builder crate (bon, derive_setters): the
//! setters are one line each and the fields stay public, so a macro of a
//! dozen lines does it with no proc-macro in the build.

/// `setters!(Type { with_field => field: FieldType, ... })`: one
/// `fn with_field(self, value) -> Self` per field.
macro_rules! setters {
    ($type:ident { $($setter:ident => $field:ident: $ty:ty),* $(,)? }) => {
        impl $type {
            $(
                #[doc = concat!("Sets [`", stringify!($type), "::", stringify!($field), "`].")]
                #[must_use]
                pub fn $setter(mut self, value: $ty) -> Self {
                    self.$field = value;
                    self
                }
            )*
        }
    };
}
pub(crate) use setters;
