//! `Pending`: the future a driver's method returns through a trait object (boxed once per
//! call: per cell, per phase or per batch, never per message).

use std::future::Future;
use std::pin::Pin;

/// A future a driver returns through a trait object.
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
