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
-- Correlated EXISTS tied by one equality: run as a semi-join.
SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id);
SELECT name FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id);
SELECT name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE c.id = o.customer_id AND o.status = 'paid' AND o.amount > 10);
SELECT name FROM customers c WHERE NOT EXISTS (SELECT * FROM orders WHERE customer_id = c.id AND status <> 'void') ORDER BY name;
SELECT id FROM customers WHERE EXISTS (SELECT 1 FROM orders WHERE orders.customer_id = customers.id) AND city IS NOT NULL;
SELECT o.id FROM orders o WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = o.customer_id);
SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.id = o.customer_id);
SELECT o.id FROM orders o WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE c.city = 'London' AND c.id = o.customer_id) ORDER BY o.id DESC;
SELECT id, EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id AND l.qty > 1) FROM orders o ORDER BY id;
-- shoal-error: 1235 a correlated EXISTS in a join's WHERE is not supported yet
SELECT c.name, o.id FROM customers c JOIN orders o ON o.customer_id = c.id WHERE EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id);
SELECT x.name FROM customers x WHERE EXISTS (SELECT 1 FROM customers y WHERE y.city = x.city AND y.name <> 'Ada');
SELECT COUNT(*) FROM orders o WHERE EXISTS (SELECT 1 FROM order_lines WHERE order_id = o.id) OR o.amount < 1;
-- shoal-error: 1054 an aggregate makes EXISTS always true: not a semi-join, not supported yet
SELECT name FROM customers c WHERE EXISTS (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id);
-- shoal-error: 1054 a correlated subquery of another form (two ties) is not supported yet
SELECT id FROM orders o WHERE EXISTS (SELECT 1 FROM order_lines l WHERE l.order_id = o.id AND l.qty = o.customer_id);
-- shoal-error: 1054 a correlated IN is not supported yet
SELECT name FROM customers c WHERE c.id IN (SELECT customer_id FROM orders o WHERE o.amount > c.id);
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
UPDATE flags f SET flag = 'ordered' WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = f.customer_id);
SELECT * FROM flags ORDER BY customer_id;
DELETE FROM flags WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = flags.customer_id);
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
