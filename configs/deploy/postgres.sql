-- PostgreSQL for armor's controld replicas (configs/deploy/controld.toml). Run it once,
-- as a superuser, on the database server:
--   sudo -u postgres psql -v ON_ERROR_STOP=1 -f postgres.sql
--   sudo -u postgres psql -c '\password armor'
-- controld creates its tables in the empty database and migrates them at start.

CREATE ROLE armor LOGIN;
CREATE DATABASE armor OWNER armor;

-- No API request waits on the database for ever: a statement that runs longer is
-- cancelled and the request fails (the client retries on the other replica). The longest
-- waits are a recording held behind a garbage collector's batch of deletions (256
-- objects) and a collection's wait for the recordings in flight.
ALTER ROLE armor SET statement_timeout = '60s';

-- Every write locks one row first, so a replica that stops in the middle of a transaction
-- (frozen, or cut off by the network, so its connection is not closed) holds up every
-- write of every replica: end such a session after this long.
ALTER ROLE armor SET idle_in_transaction_session_timeout = '60s';

-- A replica host that vanishes from the network leaves its sessions open, and with them
-- the session advisory locks a recording holds, which a garbage collection waits for:
-- probe idle connections so that such a session ends within about two minutes (the
-- kernel's default is two hours).
ALTER ROLE armor SET tcp_keepalives_idle = 60;
ALTER ROLE armor SET tcp_keepalives_interval = 10;
ALTER ROLE armor SET tcp_keepalives_count = 6;

-- A push is acknowledged only once its recording is on disk, whatever the server's own
-- default: with synchronous_commit off, a database server that crashes forgets the last
-- pushes it acknowledged (cli/fleet_test.go kills it mid-pipeline and counts none lost).
ALTER ROLE armor SET synchronous_commit = on;
