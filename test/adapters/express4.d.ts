// express 4 is installed under the alias `express4` beside express 5; both share express 5's types
// here, which cover everything the tests use.
declare module 'express4' {
  import express from 'express';
  export default express;
}
