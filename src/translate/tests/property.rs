//! Property.
