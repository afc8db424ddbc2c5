//! The push domain, below the HTTP route: push fusion (many requests' segments in one commit)
//! and the report of every committed segment (`written::on_pushed`). `routes::push` validates
//! requests, groups items by partition and maps the outcome to the wire; nothing here knows
//! about HTTP.

pub mod fusion;
pub mod written;
