-- Subqueries without correlation: IN / NOT IN (with and without NULLs
-- in the subquery's rows), EXISTS / NOT EXISTS, scalar subqueries in the
-- select list and in WHERE, and in the WHERE of UPDATE and DELETE over
-- another table. INSERT ... SELECT from a join.
SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders);
SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders);
SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders WHERE customer_id IS NOT NULL);
SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE status = 'paid') ORDER BY id;
SELECT id FROM customers WHERE id IN (SELECT customer_id FROM orders WHERE amount > 1000);
SELECT id FROM customers WHERE id NOT IN (SELECT customer_id FROM orders WHERE amount > 1000);
SELECT name FROM customers WHERE id IN (SELECT id FROM customers WHERE city = 'London') AND name <> 'Ada';
SELECT id, id IN (SELECT customer_id FROM orders), id NOT IN (SELECT customer_id FROM orders) FROM customers ORDER BY id;
SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE amount > 50);
SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE amount > 500);
SELECT id FROM customers WHERE NOT EXISTS (SELECT 1 FROM orders WHERE amount > 500);
SELECT id FROM customers WHERE NOT EXISTS (SELECT 1 FROM orders);
SELECT EXISTS (SELECT 1 FROM orders WHERE status = 'void'), NOT EXISTS (SELECT 1 FROM orders WHERE status = 'lost');
SELECT name, (SELECT MAX(amount) FROM orders) FROM customers ORDER BY id;
SELECT (SELECT COUNT(*) FROM orders), (SELECT name FROM customers WHERE id = 99), (SELECT city FROM customers WHERE id = 3);
SELECT id FROM orders WHERE amount > (SELECT AVG(amount) FROM orders);
SELECT id FROM orders WHERE customer_id = (SELECT id FROM customers WHERE name = 'Dee');
SELECT id FROM orders WHERE customer_id = (SELECT id FROM customers WHERE name = 'Nobody');
SELECT (SELECT id FROM customers);
SELECT id FROM customers WHERE id = (SELECT customer_id FROM orders);
-- A UNION (Shoal learned set operations).
SELECT id FROM customers UNION SELECT id FROM orders;
-- shoal-error: 1054 correlated subqueries come later (Shoal names the outer column as unknown)
SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id);
CREATE TABLE flags (
  customer_id INT NOT NULL PRIMARY KEY,
  flag VARCHAR(10) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO flags SELECT id, 'none' FROM customers;
UPDATE flags SET flag = 'buyer' WHERE customer_id IN (SELECT customer_id FROM orders WHERE status = 'paid');
SELECT * FROM flags ORDER BY customer_id;
UPDATE flags SET flag = 'top' WHERE customer_id = (SELECT customer_id FROM orders WHERE amount = (SELECT MAX(amount) FROM orders));
SELECT * FROM flags ORDER BY customer_id;
UPDATE flags SET flag = 'never' WHERE NOT EXISTS (SELECT 1 FROM orders WHERE amount > 1000);
SELECT * FROM flags ORDER BY customer_id;
DELETE FROM flags WHERE customer_id NOT IN (SELECT customer_id FROM orders WHERE customer_id IS NOT NULL);
SELECT * FROM flags ORDER BY customer_id;
DELETE FROM flags WHERE customer_id NOT IN (SELECT customer_id FROM orders);
SELECT COUNT(*) FROM flags;
DELETE FROM flags WHERE customer_id IN (SELECT id FROM customers WHERE city = 'London');
SELECT * FROM flags ORDER BY customer_id;
DELETE FROM flags WHERE EXISTS (SELECT 1 FROM orders WHERE amount > 0);
SELECT COUNT(*) FROM flags;
CREATE TABLE spend (
  name VARCHAR(30) NOT NULL PRIMARY KEY,
  total DECIMAL(12,2)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO spend SELECT c.name, o.amount FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'open';
SELECT * FROM spend ORDER BY name;
INSERT INTO spend (name, total) SELECT CONCAT(c.name, '-', o.id), o.amount * l.qty FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_lines l ON l.order_id = o.id WHERE l.line = 1;
SELECT * FROM spend ORDER BY name;
INSERT INTO spend (name) SELECT CONCAT(c.name, '?') FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id IS NULL;
SELECT * FROM spend ORDER BY name;
INSERT INTO spend SELECT c.name, o.amount FROM customers c JOIN orders o ON o.customer_id = c.id;
SELECT COUNT(*) FROM spend;
