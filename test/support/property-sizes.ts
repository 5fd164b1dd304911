import fc from 'fast-check';

// fast-check sizes what it generates by its base size ("small": about ten elements) even where an
// arbitrary gives a larger `maxLength`, so a test that asks for keys of up to 70 bytes saw 10 at
// most. With this, a bound a test gives is a bound it reaches.
fc.configureGlobal({ defaultSizeToMaxWhenMaxSpecified: true });
