// The registry of requests in flight is the edge's (router/http/in-flight.ts); SGLang's rid rules
// (duplicates, /abort_request's prefix match) are what it implements.
export { RequestRegistry, type InFlight } from '../../http/in-flight.ts';
