-- api_keys.expires_ms: epoch ms after which the key is refused (NULL: never);
-- storage op key_create_expiring (docs/api.md, `eaid keys create --expires`).
-- Before migrations/sqlite/ existed this column was added on open when missing
-- (eai_sq_keys_migrate); store_sqlite_migrate.c counts this file as applied
-- when it adopts such a database whose api_keys already has the column.
ALTER TABLE api_keys ADD COLUMN expires_ms INTEGER;
