//! The mechanisms by name, as typed values: what a collection spec, a config file or a CLI
//! option names. Each parses from and prints as its kebab-case name (`pm`, `bassily-smith`),
//! serialises as that string, and builds its mechanism through [`AnyNumeric::new`] /
//! [`AnyOracle::new`](crate::frequency::AnyOracle::new).

macro_rules! named_kinds {
    ($(#[$doc:meta])* $ty:ident, $what:literal { $($(#[$vdoc:meta])* $variant:ident = $name:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $ty {
            $($(#[$vdoc])* $variant),+
        }

        impl $ty {
            /// Every value, in a stable order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// Every name, in the order of [`Self::ALL`].
            pub const NAMES: &'static [&'static str] = &[$($name),+];
            /// Its name.
            pub const fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
            /// Parses a name; the error names the parameter `mechanism`, the value and every valid name.
            pub fn parse(name: &str) -> $crate::error::Result<Self> {
                match name {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::error::Error::param("mechanism", name, format!(concat!("one of ", $what, ": {}"), Self::NAMES.join(", ")))),
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> $crate::error::Result<Self> {
                Self::parse(s)
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                let s = <::std::borrow::Cow::<'de, str> as ::serde::Deserialize>::deserialize(d)?;
                Self::parse(&s).map_err(::serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use named_kinds;

/// A frequency oracle over [0, d), one per name in the registry ([`crate::frequency::any`]).
pub use crate::frequency::OracleKind;

named_kinds! {
    /// A 1-D numeric mechanism on [-1, 1] ([`crate::numeric`]).
    NumericKind, "the numeric mechanisms" {
        /// Laplace.
        Laplace = "laplace",
        /// Duchi et al.'s 1-D mechanism.
        Duchi = "duchi",
        /// Piecewise.
        Pm = "pm",
        /// Hybrid.
        Hm = "hm",
        /// SCDF.
        Scdf = "scdf",
        /// Staircase.
        Staircase = "staircase",
    }
}

named_kinds! {
    /// The numeric mechanism of a record strategy: a 1-D mechanism per attribute, or (with
    /// `split`) Duchi et al.'s multidimensional mechanism on the numeric part jointly.
    RecordNumeric, "the record strategies' numeric mechanisms" {
        /// Laplace per attribute.
        Laplace = "laplace",
        /// Duchi 1-D per attribute.
        Duchi = "duchi",
        /// Piecewise per attribute.
        Pm = "pm",
        /// Hybrid per attribute.
        Hm = "hm",
        /// SCDF per attribute.
        Scdf = "scdf",
        /// Staircase per attribute.
        Staircase = "staircase",
        /// Duchi multidimensional, jointly over the numeric attributes (`split` only).
        DuchiMulti = "duchi-multi",
    }
}

impl RecordNumeric {
    /// The 1-D mechanism, or `None` for `duchi-multi`.
    pub fn one_d(self) -> Option<NumericKind> {
        Some(match self {
            RecordNumeric::Laplace => NumericKind::Laplace,
            RecordNumeric::Duchi => NumericKind::Duchi,
            RecordNumeric::Pm => NumericKind::Pm,
            RecordNumeric::Hm => NumericKind::Hm,
            RecordNumeric::Scdf => NumericKind::Scdf,
            RecordNumeric::Staircase => NumericKind::Staircase,
            RecordNumeric::DuchiMulti => return None,
        })
    }
}

impl From<NumericKind> for RecordNumeric {
    fn from(k: NumericKind) -> Self {
        match k {
            NumericKind::Laplace => RecordNumeric::Laplace,
            NumericKind::Duchi => RecordNumeric::Duchi,
            NumericKind::Pm => RecordNumeric::Pm,
            NumericKind::Hm => RecordNumeric::Hm,
            NumericKind::Scdf => RecordNumeric::Scdf,
            NumericKind::Staircase => RecordNumeric::Staircase,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_str_and_json() {
        for k in OracleKind::ALL {
            assert_eq!(OracleKind::parse(k.name()).unwrap(), *k);
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{k}\""));
            assert_eq!(serde_json::from_str::<OracleKind>(&json).unwrap(), *k);
        }
        for k in RecordNumeric::ALL {
            assert_eq!(k.name().parse::<RecordNumeric>().unwrap(), *k);
            assert_eq!(k.one_d().map(RecordNumeric::from).unwrap_or(*k), *k);
        }
        let e = serde_json::from_str::<NumericKind>("\"bogus\"").unwrap_err().to_string();
        assert!(e.contains("\"bogus\"") && e.contains("one of the numeric mechanisms: laplace"), "{e}");
        assert_eq!(NumericKind::NAMES, crate::numeric::NUMERIC_NAMES);
        assert_eq!(OracleKind::NAMES, crate::frequency::FREQUENCY_NAMES);
    }
}
