//! The ratatui operator console (placeholder; being written).
