//! The crate's error type. Every message is complete on its own: it names the file, the column
//! (and row, for a bad cell), the value and what was expected.

/// Errors of harmony-data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file (`-` = standard input).
        path: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The input is not a table Harmony can read: an unknown or corrupt format, an unsupported
    /// column type, a missing column, a bad cell. The message says which and where.
    #[error("{0}")]
    Data(String),
    /// A schema file that does not parse or does not validate.
    #[error("{0}")]
    Schema(String),
}

/// Result alias for harmony-data.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for [`Error::Data`].
    pub fn data(message: impl Into<String>) -> Self {
        Error::Data(message.into())
    }
}
