-- What Shoal does not do yet answers 1235 (ER_NOT_SUPPORTED_YET) rather
-- than something wrong; MariaDB answers these. When Shoal learns one,
-- drop its shoal-error line and the rows must match.
-- shoal-error: 1235 RIGHT JOIN is a LEFT JOIN with the tables swapped, not there yet
SELECT c.id, o.id FROM orders o RIGHT JOIN customers c ON c.id = o.customer_id;
-- shoal-error: 1235 window functions come later
SELECT id, ROW_NUMBER() OVER (ORDER BY id) FROM customers;
-- shoal-error: 1235 date arithmetic comes later
SELECT d + INTERVAL 1 DAY FROM times WHERE id = 1;
