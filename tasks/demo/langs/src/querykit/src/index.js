'use strict';

module.exports = {
  ...require('./query'),
  ...require('./duration'),
};
