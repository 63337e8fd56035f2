/** A check of `/readyz`: the gateway is ready when every check is (Redis answers, every worker listens). */
export interface ReadinessCheck {
  name: string;
  ready(): Promise<boolean>;
}
