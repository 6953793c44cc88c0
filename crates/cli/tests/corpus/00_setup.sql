-- The corpus's tables, made and filled the same way on both servers.
-- Strings compare by bytes on Shoal (utf8mb4_bin), so MariaDB's tables
-- and the connection use that collation too.
SET NAMES utf8mb4 COLLATE utf8mb4_bin;
CREATE DATABASE corpus;
USE corpus;

CREATE TABLE ints (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
  mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, bu BIGINT UNSIGNED
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO ints VALUES
  (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0),
  (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615),
  (3, 0, 1, -1, 1, 0, 1, -1, 1, -1, 1),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, 5, 10, 300, 3000, -70000, 70000, 123456, 654321, 1234567890123, 9876543210987);

CREATE TABLE nums (
  id INT NOT NULL PRIMARY KEY,
  f FLOAT, d DOUBLE, d52 DECIMAL(5,2), d100 DECIMAL(10,0), d206 DECIMAL(20,6), d3810 DECIMAL(38,10)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO nums VALUES
  (1, 1.5, 2.25, 123.45, 1234567890, 12345678901234.123456, 1234567890123456789012345678.0123456789),
  (2, -1.5, -2.25, -999.99, -9999999999, -0.000001, -0.0000000001),
  (3, 0, -0.0, 0.00, 0, 0, 0),
  (4, NULL, NULL, NULL, NULL, NULL, NULL),
  (5, 3.25, 1e300, 0.5, 7, 2.5, 3.5),
  (6, 100, 0.1, 1.05, -7, -2.5, -3.5);

CREATE TABLE strs (
  id INT NOT NULL PRIMARY KEY,
  c CHAR(8), v VARCHAR(20), b BINARY(4), vb VARBINARY(8)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO strs VALUES
  (1, 'abc', 'abc', 'ab', 'ab'),
  (2, 'abc  ', 'abc  ', 'abcd', 'abcd'),
  (3, '', '', '', ''),
  (4, NULL, NULL, NULL, NULL),
  (5, 'Zeta', 'zeta', 'Z', 'z'),
  (6, 'héllo', 'naïve café', 'é', 'ü'),
  (7, '日本', '日本語テキスト', 'x', 'y'),
  (8, 'a%b', 'a_b\\c', 'a', 'b'),
  (9, 'ABC', 'ABC', 'ABC', 'ABC'),
  (10, 'emoji', '🙂 smile', 'e', 'f');

CREATE TABLE times (
  id INT NOT NULL PRIMARY KEY,
  d DATE, t TIME, dt DATETIME, ts TIMESTAMP NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO times VALUES
  (1, '2024-02-29', '12:34:56', '2024-02-29 12:34:56', '2024-02-29 12:34:56'),
  (2, '1000-01-01', '-838:59:59', '1000-01-01 00:00:00', '1970-01-01 00:00:01'),
  (3, '9999-12-31', '838:59:59', '9999-12-31 23:59:59', '2038-01-19 03:14:07'),
  (4, NULL, NULL, NULL, NULL),
  (5, '2000-01-01', '00:00:00', '2000-01-01 00:00:00', '2000-01-01 00:00:00'),
  (6, '1999-12-31', '-00:00:01', '1999-12-31 23:59:59', '1999-12-31 23:59:59');

CREATE TABLE customers (
  id INT NOT NULL PRIMARY KEY,
  name VARCHAR(30) NOT NULL,
  city VARCHAR(30),
  UNIQUE KEY by_name (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO customers VALUES
  (1, 'Ada', 'London'), (2, 'Bob', 'Paris'), (3, 'Cy', NULL), (4, 'Dee', 'London'), (5, 'Eve', 'Berlin');

CREATE TABLE orders (
  id INT NOT NULL PRIMARY KEY,
  customer_id INT,
  amount DECIMAL(10,2) NOT NULL,
  status VARCHAR(10) NOT NULL,
  KEY by_customer (customer_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO orders VALUES
  (10, 1, 25.50, 'paid'), (11, 1, 100.00, 'open'), (12, 2, 7.25, 'paid'),
  (13, 4, 0.99, 'void'), (14, 4, 60.00, 'paid'), (15, NULL, 12.00, 'open'), (16, 9, 5.00, 'paid');

CREATE TABLE order_lines (
  order_id INT NOT NULL,
  line INT NOT NULL,
  product VARCHAR(20) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(8,2) NOT NULL,
  PRIMARY KEY (order_id, line)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO order_lines VALUES
  (10, 1, 'pen', 3, 1.50), (10, 2, 'ink', 1, 21.00), (11, 1, 'desk', 1, 100.00),
  (12, 1, 'pen', 5, 1.45), (14, 1, 'lamp', 2, 30.00), (16, 1, 'ink', 1, 5.00);
