/**
 * The types of uPlot's ESM build, which `npm run build` copies beside the console as
 * dist/console/vendor/uPlot.esm.js: the browser loads that file by its relative path, and tsc reads the
 * package's own declarations through this one.
 */
import uPlot from 'uplot';
export default uPlot;
