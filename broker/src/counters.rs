//! One declaration per broker counter. `counters!` declares a set of counters once (field,
//! Prometheus name, help text) and derives from it the atomics the hot paths bump, the plain
//! copy a snapshot takes, the `/metrics` lines that copy renders, and the catalogue the tests
//! check the exposition against. A leaf: every counter set of the broker is declared with it.

use std::fmt::Write;

/// One counter as the catalogue lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// The field of the counter set that holds it.
    pub field: &'static str,
    /// Its Prometheus name (`queen_..._total`).
    pub name: &'static str,
    pub help: &'static str,
}

/// Declares a counter set: `counters! { Live, Counts { field: "name", "help"; ... } }` makes
/// `Live` (one `AtomicU64` per field, `Live::CATALOGUE`, `Live::counts()`) and `Counts` (the
/// same fields as `u64`, `Counts::render`).
macro_rules! counters {
    (
        $(#[$meta:meta])* $live:ident,
        $(#[$counts_meta:meta])* $counts:ident {
            $( $(#[$field_meta:meta])* $field:ident: $name:literal, $help:literal; )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Default)]
        pub struct $live {
            $( $(#[$field_meta])* pub $field: std::sync::atomic::AtomicU64, )*
        }

        $(#[$counts_meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $counts {
            $( $(#[$field_meta])* pub $field: u64, )*
        }

        impl $live {
            /// Every counter of the set, in rendering order.
            pub const CATALOGUE: &'static [$crate::counters::Counter] = &[
                $( $crate::counters::Counter {
                    field: stringify!($field),
                    name: $name,
                    help: $help,
                }, )*
            ];

            /// The counters' values now.
            pub fn counts(&self) -> $counts {
                $counts {
                    $( $field: self.$field.load(std::sync::atomic::Ordering::Relaxed), )*
                }
            }
        }

        impl $counts {
            /// Writes every counter with its HELP and TYPE lines.
            pub fn render(&self, out: &mut String) {
                $( $crate::counters::write(out, $name, $help, self.$field); )*
            }
        }
    };
}
pub(crate) use counters;

/// Writes one counter with its HELP and TYPE lines.
pub fn write(out: &mut String, name: &str, help: &str, value: u64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
    );
}
