-- A query mix for sqlite3: build a table, then aggregate, sort, join and
-- search it.  Run in a loop by opvm-wl.
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
DROP TABLE IF EXISTS t;
DROP TABLE IF EXISTS u;
CREATE TABLE t (id INTEGER PRIMARY KEY, k INTEGER, s TEXT, v REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 40000)
INSERT INTO t SELECT x, (x * 7919) % 1000, hex(randomblob(8)), (x % 97) * 1.5 FROM c;
CREATE TABLE u AS SELECT k, count(*) AS n, avg(v) AS a FROM t GROUP BY k;
SELECT count(*), sum(v) FROM t WHERE s LIKE '%A%B%';
SELECT k, n, a FROM u ORDER BY a DESC, k LIMIT 5;
SELECT t.k, count(*) FROM t JOIN u ON t.k = u.k WHERE u.n > 30 GROUP BY t.k ORDER BY 2 DESC LIMIT 3;
SELECT s FROM t ORDER BY s LIMIT 1 OFFSET 20000;
CREATE INDEX ti ON t(k, v);
SELECT sum(v) FROM t WHERE k BETWEEN 100 AND 600;
