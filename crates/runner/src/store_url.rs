//! Where a run store lives: a SQLite file or a PostgreSQL URL, as one typed
//! value instead of a path that may secretly hold a URL.

use super::checkpoint::{RunStore, StoreError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A run store's location. Parsed from text: `postgres://…` and
/// `postgresql://…` are PostgreSQL URLs, anything else is a SQLite file path.
/// Its `Display` hides a password.
///
/// ```
/// use lovia_runner::StoreUrl;
/// let url: StoreUrl = "postgres://lovia:s3cret@db/lovia".parse().unwrap();
/// assert_eq!(url.to_string(), "postgres://lovia:***@db/lovia");
/// assert_eq!("runs.db".parse::<StoreUrl>().unwrap(), StoreUrl::Sqlite("runs.db".into()));
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A SQLite file, created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL.
    Postgres(String),
}

impl StoreUrl {
    /// A relative SQLite path taken relative to `base` (a config file's directory).
    #[must_use]
    pub fn relative_to(self, base: &Path) -> Self {
        match self {
            StoreUrl::Sqlite(path) if path.is_relative() => StoreUrl::Sqlite(base.join(path)),
            other => other,
        }
    }

    /// Opens the store, creating its tables if they are missing.
    pub async fn open(&self) -> Result<Arc<dyn RunStore>, StoreError> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreUrl::Sqlite(path) => Ok(Arc::new(super::SqliteRunStore::open(path)?)),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(url) => Ok(Arc::new(super::PostgresRunStore::open(url).await?)),
            #[allow(unreachable_patterns, reason = "reached when a store feature is off")]
            other => Err(StoreError::Database {
                location: other.to_string(),
                message: "this build of lovia-runner has no such store (features `sqlite`, `postgres`)".into(),
            }),
        }
    }
}

impl std::str::FromStr for StoreUrl {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            StoreUrl::Postgres(s.to_owned())
        } else {
            StoreUrl::Sqlite(PathBuf::from(s))
        })
    }
}

impl From<PathBuf> for StoreUrl {
    fn from(path: PathBuf) -> Self {
        match path.to_str() {
            Some(text) => text.parse().unwrap_or(StoreUrl::Sqlite(path)),
            None => StoreUrl::Sqlite(path),
        }
    }
}

impl From<&str> for StoreUrl {
    fn from(text: &str) -> Self {
        text.parse().unwrap_or_else(|never| match never {})
    }
}

impl From<String> for StoreUrl {
    fn from(text: String) -> Self {
        text.as_str().into()
    }
}

impl std::fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreUrl::Sqlite(path) => write!(f, "{}", path.display()),
            StoreUrl::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl Serialize for StoreUrl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            StoreUrl::Sqlite(path) => path.serialize(serializer),
            StoreUrl::Postgres(url) => url.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for StoreUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(String::deserialize(deserializer)?.into())
    }
}

/// `url` with any password replaced by `***`, in the userinfo or as a
/// `password=` query parameter.
pub(crate) fn redact(url: &str) -> String {
    let mut out = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    };
    if let Some(q) = out.find('?') {
        let (base, query) = out.split_at(q + 1);
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect();
        out = format!("{base}{}", query.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_reach_error_messages() {
        assert_eq!(super::redact("postgres://lovia:s3cret@db/x"), "postgres://lovia:***@db/x");
        assert_eq!(super::redact("postgres://lovia@db/x"), "postgres://lovia@db/x");
        assert_eq!(
            super::redact("postgres://lovia@db/x?sslmode=disable&password=s3cret"),
            "postgres://lovia@db/x?sslmode=disable&password=***"
        );
        assert_eq!(super::redact("host=/tmp user=x"), "host=/tmp user=x");
    }
}
