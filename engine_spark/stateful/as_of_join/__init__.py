"""Event-time as-of joins of a stream with a temporal table (Flink's ``FOR SYSTEM_TIME AS OF``)."""
