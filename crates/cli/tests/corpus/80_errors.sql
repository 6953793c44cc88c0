-- Statements that fail, with MySQL's error codes, and what they left.
CREATE TABLE strict (
  id INT NOT NULL PRIMARY KEY,
  t TINYINT NOT NULL,
  u TINYINT UNSIGNED,
  v VARCHAR(5),
  d DECIMAL(4,2),
  dt DATE,
  UNIQUE KEY by_v (v)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO strict VALUES (1, 1, 1, 'one', 1.5, '2024-01-01');
-- 1062: a duplicate primary key, a duplicate unique key.
INSERT INTO strict VALUES (1, 2, 2, 'two', 2.5, '2024-01-02');
INSERT INTO strict VALUES (2, 2, 2, 'one', 2.5, '2024-01-02');
UPDATE strict SET id = 1 WHERE id = 1;
INSERT INTO strict VALUES (2, 2, 2, 'two', 2.5, '2024-01-02');
UPDATE strict SET v = 'one' WHERE id = 2;
-- 1054: unknown columns, anywhere.
SELECT nope FROM strict;
SELECT id FROM strict WHERE nope = 1;
SELECT id FROM strict ORDER BY nope;
SELECT id FROM strict GROUP BY nope;
UPDATE strict SET nope = 1;
INSERT INTO strict (id, nope) VALUES (3, 1);
SELECT strict.nope FROM strict;
SELECT c.nope FROM customers c JOIN orders o ON o.customer_id = c.id;
-- 1146: unknown tables.
SELECT * FROM no_such_table;
INSERT INTO no_such_table VALUES (1);
UPDATE no_such_table SET a = 1;
DELETE FROM no_such_table;
SELECT * FROM customers c JOIN no_such_table x ON x.id = c.id;
-- 1064: syntax.
SELECT FROM strict;
SELECT * FROM strict WHERE;
INSERT INTO strict VALUES (;
SELECT 1 +;
UPDATE strict SET WHERE id = 1;
-- 1048: NULL into a NOT NULL column.
INSERT INTO strict VALUES (3, NULL, 1, 'x', 1, '2024-01-01');
UPDATE strict SET t = NULL WHERE id = 1;
INSERT INTO strict (id, t) VALUES (NULL, 1);
-- 1264: out of range for the column.
INSERT INTO strict VALUES (3, 128, 1, 'x', 1, '2024-01-01');
INSERT INTO strict VALUES (3, -129, 1, 'x', 1, '2024-01-01');
INSERT INTO strict VALUES (3, 1, -1, 'x', 1, '2024-01-01');
INSERT INTO strict VALUES (3, 1, 256, 'x', 1, '2024-01-01');
INSERT INTO strict VALUES (3, 1, 1, 'x', 100, '2024-01-01');
INSERT INTO strict VALUES (3, 1, 1, 'x', -100.5, '2024-01-01');
UPDATE strict SET t = t + 200 WHERE id = 1;
UPDATE strict SET u = u - 5 WHERE id = 1;
INSERT INTO ints (id, bu) VALUES (100, -1);
INSERT INTO ints (id, i) VALUES (100, 2147483648);
-- 1406: too long for the column.
INSERT INTO strict VALUES (3, 1, 1, 'toolong', 1, '2024-01-01');
-- 1366: not a number.
INSERT INTO strict VALUES (3, 'abc', 1, 'x', 1, '2024-01-01');
INSERT INTO strict VALUES (3, 1, 1, 'x', 'zz', '2024-01-01');
UPDATE strict SET t = 'x' WHERE id = 1;
-- 1292: not a date.
INSERT INTO strict VALUES (3, 1, 1, 'x', 1, '2024-02-30');
INSERT INTO strict VALUES (3, 1, 1, 'x', 1, 'yesterday');
INSERT INTO times (id, dt) VALUES (100, '2024-13-01 00:00:00');
-- 1052: ambiguous columns.
SELECT id FROM customers c JOIN orders o ON o.customer_id = c.id;
SELECT name FROM customers a JOIN customers b ON a.id = b.id;
SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id WHERE id = 10;
-- 1690: arithmetic out of range.
SELECT 9223372036854775807 + 1;
SELECT -9223372036854775807 - 2;
SELECT 18446744073709551615 + 1;
SELECT 4294967296 * 4294967296;
SELECT bi * 2 FROM ints WHERE id = 2;
SELECT bu + 1 FROM ints WHERE id = 2;
SELECT bu * 2 FROM ints WHERE id = 2;
SELECT 0 - bu FROM ints WHERE id = 2;
SELECT iu - 1 FROM ints WHERE id = 1;
SELECT bu - 1, iu - 0 FROM ints WHERE id = 3;
SELECT 1e308 * 10;
-- Nothing above changed the table but the two good rows.
SELECT * FROM strict ORDER BY id;
-- 1050 / 1049 / 1051: tables and databases that are there or not.
CREATE TABLE strict (a INT PRIMARY KEY) ENGINE=InnoDB;
DROP TABLE no_such_table;
USE no_such_database;
SELECT * FROM no_such_database.t;
