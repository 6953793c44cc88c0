-- INSERT ... SELECT, INSERT ... ON DUPLICATE KEY UPDATE, UPDATE and
-- DELETE with WHERE / ORDER BY / LIMIT, each followed by a SELECT that
-- shows what it did.
CREATE TABLE totals (
  customer_id INT NOT NULL PRIMARY KEY,
  n INT NOT NULL,
  total DECIMAL(12,2) NOT NULL,
  note VARCHAR(20)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO totals (customer_id, n, total) SELECT customer_id, COUNT(*), SUM(amount) FROM orders WHERE customer_id IS NOT NULL GROUP BY customer_id;
SELECT * FROM totals ORDER BY customer_id;
INSERT INTO totals (customer_id, n, total) VALUES (1, 1, 5.00) ON DUPLICATE KEY UPDATE n = n + 1, total = total + VALUES(total);
SELECT * FROM totals ORDER BY customer_id;
INSERT INTO totals (customer_id, n, total) VALUES (3, 1, 1.25), (4, 1, 1.00) ON DUPLICATE KEY UPDATE note = 'again';
SELECT * FROM totals ORDER BY customer_id;
INSERT INTO totals VALUES (5, 0, 0, 'new') ON DUPLICATE KEY UPDATE n = 99;
SELECT * FROM totals ORDER BY customer_id;
INSERT INTO totals (customer_id, n, total) SELECT id + 100, id, id * 1.5 FROM customers WHERE city = 'London';
SELECT customer_id, n, total FROM totals WHERE customer_id > 100 ORDER BY customer_id;
UPDATE totals SET note = 'big' WHERE total > 50;
SELECT customer_id, note FROM totals ORDER BY customer_id;
UPDATE totals SET n = n * 10, total = total - 0.01 WHERE customer_id IN (2, 3);
SELECT customer_id, n, total FROM totals WHERE customer_id IN (2, 3) ORDER BY customer_id;
UPDATE totals SET note = 'first' ORDER BY total DESC LIMIT 2;
SELECT customer_id, note FROM totals ORDER BY customer_id;
UPDATE totals SET note = NULL WHERE note = 'nothing';
UPDATE totals SET total = total + 1;
SELECT SUM(total), COUNT(*) FROM totals;
UPDATE totals SET n = n + 1 WHERE customer_id = 999;
SELECT SUM(n) FROM totals;
DELETE FROM totals WHERE customer_id > 100 ORDER BY customer_id DESC LIMIT 1;
SELECT customer_id FROM totals ORDER BY customer_id;
DELETE FROM totals WHERE note IS NULL;
SELECT customer_id, note FROM totals ORDER BY customer_id;
DELETE FROM totals ORDER BY customer_id LIMIT 1;
SELECT customer_id FROM totals ORDER BY customer_id;
DELETE FROM totals WHERE customer_id = 12345;
DELETE FROM totals;
SELECT COUNT(*) FROM totals;
INSERT INTO totals VALUES (1, 1, 1, 'a'), (2, 2, 2, 'b');
REPLACE INTO totals VALUES (2, 20, 20, 'replaced');
SELECT * FROM totals ORDER BY customer_id;
INSERT IGNORE INTO totals VALUES (1, 9, 9, 'ignored'), (3, 3, 3, 'c');
SELECT * FROM totals ORDER BY customer_id;
BEGIN;
UPDATE totals SET n = 0;
ROLLBACK;
SELECT customer_id, n FROM totals ORDER BY customer_id;
START TRANSACTION;
DELETE FROM totals WHERE customer_id = 3;
COMMIT;
SELECT customer_id FROM totals ORDER BY customer_id;
CREATE TABLE counters (k VARCHAR(10) NOT NULL PRIMARY KEY, v BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO counters VALUES ('a', 1) ON DUPLICATE KEY UPDATE v = v + 1;
INSERT INTO counters VALUES ('a', 1) ON DUPLICATE KEY UPDATE v = v + 1;
INSERT INTO counters VALUES ('a', 1), ('b', 5) ON DUPLICATE KEY UPDATE v = v + VALUES(v);
SELECT * FROM counters ORDER BY k;
UPDATE counters SET v = v - 10 WHERE k = 'a';
SELECT * FROM counters ORDER BY k;
UPDATE counters SET v = 18446744073709551615 WHERE k = 'b';
UPDATE counters SET v = v + 1 WHERE k = 'b';
SELECT * FROM counters ORDER BY k;
