// The s3rver 3.x server for kiln's S3 tests, with one fix: libs3 signs
// bucket-level requests (listing) over "/BUCKET/" where s3rver checks
// "/BUCKET", so those are checked again over "/BUCKET/". Object requests go
// through s3rver's own signature check. Used by s3_store.sh and run_s3.sh.
// node launch.js S3RVER_PACKAGE_DIR DATA_DIR PORT_FILE BUCKET
'use strict';
const fs = require('fs');
const [pkg, dir, portFile, bucket] = process.argv.slice(2);
const authPath = require.resolve(pkg + '/lib/middleware/authentication');
const makeAuth = require(authPath);
// Must replace the module before s3rver's router loads it.
require.cache[authPath].exports = () => {
  const auth = makeAuth();
  return async function authentication(ctx, next) {
    let passed = false;
    try {
      return await auth(ctx, () => { passed = true; return next(); });
    } catch (err) {
      if (passed || err.code !== 'SignatureDoesNotMatch' || !ctx.params.bucket || ctx.params.key) throw err;
    }
    // bucket-level request: check it again over "/BUCKET/"
    const vhost = ctx.state.vhost;
    const mount = ctx.mountPath;
    ctx.state.vhost = true;
    ctx.mountPath = '/';
    return auth(ctx, () => { ctx.state.vhost = vhost; ctx.mountPath = mount; return next(); });
  };
};
const S3rver = require(pkg);
new S3rver({
  address: '127.0.0.1', port: 0, silent: false, directory: dir, serviceEndpoint: 'localhost',
  configureBuckets: [{ name: bucket, configs: [] }],
}).run().then(({ port }) => {
  fs.writeFileSync(portFile + '.tmp', String(port));
  fs.renameSync(portFile + '.tmp', portFile);
}).catch(err => { console.error(err); process.exit(1); });
