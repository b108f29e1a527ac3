// Starts the npm s3rver 3.x for kiln's S3 tests on 127.0.0.1 with one
// bucket, and writes its port to PORT_FILE once it listens. s3rver is a
// lenient server written by others: it checks no Signature V4, so the tests
// that need signatures verified use s3v4_server.py; s3rver shows that
// kiln's client reads another implementation's answers.
// node s3rver-launch.js S3RVER_PACKAGE_DIR DATA_DIR PORT_FILE BUCKET
'use strict';
const fs = require('fs');
const [pkg, dir, portFile, bucket] = process.argv.slice(2);
const S3rver = require(pkg);
new S3rver({
  address: '127.0.0.1', port: 0, silent: false, directory: dir, serviceEndpoint: 'localhost',
  configureBuckets: [{ name: bucket, configs: [] }],
}).run().then(({ port }) => {
  fs.writeFileSync(portFile + '.tmp', String(port));
  fs.renameSync(portFile + '.tmp', portFile);
}).catch(err => { console.error(err); process.exit(1); });
